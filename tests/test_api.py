"""The HTTP service on a real uvicorn server on loopback, driven with httpx."""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from app.api import create_app
from app.settings import Settings

from .redis_server import redis_server
from .servers import serve_port
from .sse import collect, frames
from .support import TOPIC

Service = Callable[..., Any]
TERMINAL = {"completed", "failed", "cancelled"}


@pytest.fixture
def service(tmp_path: Path, corpus_index: Path) -> Service:
    """Start the service with these settings; yields an httpx client on its base URL."""

    @asynccontextmanager
    async def running(
        headers: dict[str, str] | None = None, **overrides: Any
    ) -> AsyncIterator[httpx.AsyncClient]:
        settings = Settings(
            data_dir=tmp_path / "data",
            corpus_index=corpus_index,
            search_provider="local",
            **overrides,
        )
        with serve_port(create_app(settings), lifespan="on") as port:
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30
            ) as client:
                yield client

    return running


async def wait_for_status(
    client: httpx.AsyncClient, thread_id: str, wanted: set[str]
) -> dict[str, Any]:
    """Follow the thread's events until its status is one of `wanted` (no polling sleeps).

    The stream replays the thread's history first, so a matching status event may be an
    old one (an earlier approval): the thread's detail has the last word.
    """
    detail: dict[str, Any] = (await client.get(f"/v1/research/{thread_id}")).json()
    if detail["status"] in wanted:
        return detail
    async with client.stream("GET", f"/v1/research/{thread_id}/events") as response:
        async for frame in frames(response):
            if frame.event == "status" and frame.data["status"] in wanted:
                detail = (await client.get(f"/v1/research/{thread_id}")).json()
                if detail["status"] in wanted:
                    break
    return detail


async def test_a_run_with_plan_approval_streams_to_a_cited_report(service: Service) -> None:
    async with service() as client:
        started = await client.post(
            "/v1/research", json={"topic": TOPIC, "options": {"approval": "plan"}}
        )
        assert started.status_code == 202, started.text
        body = started.json()
        thread_id = body["thread_id"]
        assert started.headers["location"] == f"/v1/research/{thread_id}"
        assert body["links"]["events"] == f"/v1/research/{thread_id}/events"

        before = await collect(
            client, f"/v1/research/{thread_id}/events", until="approval_required"
        )
        names = [f.event for f in before]
        assert names[0] == "status" and "plan" in names and names[-1] == "approval_required"
        # The run's status is written while the graph starts, yet its event comes first.
        first_step = before[: names.index("node_started")]
        assert [(f.event, f.data["status"]) for f in first_step] == [
            ("status", "queued"),
            ("status", "running"),
        ]
        assert before[-1].data["type"] == "plan"
        detail = (await client.get(f"/v1/research/{thread_id}")).json()
        assert detail["status"] == "waiting_for_approval"
        assert detail["approval"]["type"] == "plan" and detail["plan"]["search_queries"]

        answer = await client.post(f"/v1/research/{thread_id}/resume", json={"decision": "approve"})
        assert answer.status_code == 200, answer.text
        assert (
            await client.post(f"/v1/research/{thread_id}/resume", json={"decision": "approve"})
        ).status_code == 409

        after = await collect(
            client,
            f"/v1/research/{thread_id}/events",
            headers={"Last-Event-ID": str(before[-1].id)},
        )
        assert after[0].id == before[-1].id + 1
        names = [f.event for f in after]
        for expected in (
            "node_started",
            "node_finished",
            "source",
            "note",
            "draft",
            "review",
            "report",
            "done",
        ):
            assert expected in names, expected
        assert after[-1].data == {"status": "completed"}

        markdown = await client.get(f"/v1/research/{thread_id}/report")
        assert markdown.headers["content-type"].startswith("text/markdown")
        assert "## References" in markdown.text
        as_json = (
            await client.get(
                f"/v1/research/{thread_id}/report", headers={"Accept": "application/json"}
            )
        ).json()
        assert as_json["sources"] and as_json["sources"][0]["n"] == 1
        assert all(s["title"] and s["url"].startswith(("http", "file")) for s in as_json["sources"])
        notes = (await client.get(f"/v1/research/{thread_id}/notes")).json()
        assert notes and notes[0]["step_no"] == 1


async def test_a_reconnecting_client_gets_every_missed_event_exactly_once(service: Service) -> None:
    async with service() as client:
        thread_id = (await client.post("/v1/research", json={"topic": TOPIC})).json()["thread_id"]
        first = await collect(client, f"/v1/research/{thread_id}/events", limit=3)
        rest = await collect(
            client, f"/v1/research/{thread_id}/events", headers={"Last-Event-ID": str(first[-1].id)}
        )
        again = await collect(client, f"/v1/research/{thread_id}/events?after=0")
    ids = [f.id for f in first + rest]
    assert ids == list(range(1, len(ids) + 1)), "no gap, no duplicate"
    assert [f.id for f in again] == ids


async def test_a_client_that_disconnects_does_not_stop_the_run(service: Service) -> None:
    async with service(search_delay_ms=50) as client:
        thread_id = (await client.post("/v1/research", json={"topic": TOPIC})).json()["thread_id"]
        await collect(client, f"/v1/research/{thread_id}/events", limit=1)
        detail = await wait_for_status(client, thread_id, TERMINAL)
    assert detail["status"] == "completed" and detail["report"]


async def test_pause_stops_at_a_node_boundary_and_resume_finishes(service: Service) -> None:
    async with service(search_delay_ms=300) as client:
        thread_id = (await client.post("/v1/research", json={"topic": TOPIC})).json()["thread_id"]
        assert (await client.post(f"/v1/research/{thread_id}/pause")).status_code == 200
        paused = await wait_for_status(client, thread_id, {"paused"} | TERMINAL)
        assert paused["status"] == "paused"
        assert (
            await client.post(f"/v1/research/{thread_id}/resume", json={"decision": "approve"})
        ).status_code == 409
        assert (await client.post(f"/v1/research/{thread_id}/resume")).status_code == 200
        done = await wait_for_status(client, thread_id, TERMINAL)
    assert done["status"] == "completed"


async def test_cancel_ends_the_run_and_closes_its_stream(service: Service) -> None:
    async with service(search_delay_ms=2000) as client:
        thread_id = (await client.post("/v1/research", json={"topic": TOPIC})).json()["thread_id"]
        await wait_for_status(client, thread_id, {"running"})
        cancelled = await client.post(f"/v1/research/{thread_id}/cancel")
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
        events = await collect(client, f"/v1/research/{thread_id}/events")
        assert events[-1].event == "done" and events[-1].data == {"status": "cancelled"}
        assert (await client.post(f"/v1/research/{thread_id}/cancel")).status_code == 409
        assert (await client.post(f"/v1/research/{thread_id}/resume")).status_code == 409


async def test_another_key_s_thread_is_not_found(service: Service) -> None:
    async with service(api_keys=["key-a", "key-b"]) as client:
        unauthorised = await client.post("/v1/research", json={"topic": TOPIC})
        assert unauthorised.status_code == 401
        assert unauthorised.json()["error"]["code"] == "unauthorized"
        mine = await client.post(
            "/v1/research", json={"topic": TOPIC}, headers={"Authorization": "Bearer key-a"}
        )
        thread_id = mine.json()["thread_id"]
        theirs = await client.get(f"/v1/research/{thread_id}", headers={"X-API-Key": "key-b"})
        assert theirs.status_code == 404 and theirs.json()["error"]["code"] == "not_found"
        listing = (await client.get("/v1/research", headers={"X-API-Key": "key-b"})).json()
        assert listing["items"] == []
        assert (
            await client.get(f"/v1/research/{thread_id}", headers={"X-API-Key": "key-a"})
        ).status_code == 200


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"topic": ""}, "topic"),
        ({"topic": "x" * 10_000}, "topic"),
        ({"topic": TOPIC, "options": {"max_iterations": 0}}, "options.max_iterations"),
        ({"topic": TOPIC, "options": {"max_results": 99}}, "options.max_results"),
        ({"topic": TOPIC, "options": {"approval": "always"}}, "options.approval"),
        ({"topic": TOPIC, "options": {"min_sources": "many"}}, "options.min_sources"),
        ({"topic": 42}, "topic"),
        ({"subject": TOPIC}, "topic"),
    ],
)
async def test_bad_bodies_get_422_with_field_details(
    service: Service, body: dict[str, Any], field: str
) -> None:
    async with service() as client:
        answer = await client.post("/v1/research", json=body)
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "validation_error"
    assert field in [f["field"] for f in error["details"]["fields"]]


async def test_a_full_queue_answers_429(service: Service) -> None:
    async with service(search_delay_ms=2000, max_concurrent_runs=1, max_queued_runs=0) as client:
        first = await client.post("/v1/research", json={"topic": TOPIC})
        assert first.status_code == 202
        second = await client.post("/v1/research", json={"topic": TOPIC})
        assert second.status_code == 429 and second.json()["error"]["code"] == "too_many_runs"
        await client.post(f"/v1/research/{first.json()['thread_id']}/cancel")


async def test_unknown_threads_are_404_and_health_answers(service: Service) -> None:
    async with service() as client:
        assert (await client.get("/v1/research/nope")).status_code == 404
        assert (await client.get("/healthz")).json() == {"status": "ok"}
        assert (await client.get("/readyz")).json() == {"status": "ready"}
        listing = await client.get("/v1/research?cursor=garbage")
        assert listing.status_code == 422  # a malformed parameter, not a state conflict
        assert listing.json()["error"]["code"] == "validation_error"
        assert "cursor" in listing.json()["error"]["message"]


async def test_threads_are_listed_newest_first_with_a_cursor(service: Service) -> None:
    async with service() as client:
        ids = [
            (await client.post("/v1/research", json={"topic": f"{TOPIC} {i}"})).json()["thread_id"]
            for i in range(3)
        ]
        page = (await client.get("/v1/research?limit=2")).json()
        assert [t["thread_id"] for t in page["items"]] == ids[::-1][:2]
        rest = (await client.get(f"/v1/research?limit=2&cursor={page['next_cursor']}")).json()
        assert [t["thread_id"] for t in rest["items"]] == ids[:1]
        for thread_id in ids:
            await wait_for_status(client, thread_id, TERMINAL)
        assert (await client.delete(f"/v1/research/{ids[0]}")).status_code == 204
        assert (await client.get(f"/v1/research/{ids[0]}")).status_code == 404


async def test_the_list_and_the_detail_say_when_the_sources_were_insufficient(
    service: Service,
) -> None:
    async with service() as client:
        known = (await client.post("/v1/research", json={"topic": TOPIC})).json()["thread_id"]
        unknown = (await client.post("/v1/research", json={"topic": "zyxwv frobnication"})).json()[
            "thread_id"
        ]
        for thread_id in (known, unknown):
            await wait_for_status(client, thread_id, TERMINAL)
        items = {t["thread_id"]: t for t in (await client.get("/v1/research")).json()["items"]}
        assert items[known]["report_status"] == "final"
        assert items[unknown]["report_status"] == "insufficient"
        detail = (await client.get(f"/v1/research/{unknown}")).json()
        assert detail["status"] == "completed" and detail["report_status"] == "insufficient"
        assert "do not cover this subject" in detail["stopped"]
        assert (
            "> **Insufficient sources:** the collected sources do not cover this subject"
            in (detail["report"])
        )
        assert "corpus index" in detail["report"]


async def _waiting_for_plan(client: httpx.AsyncClient) -> tuple[str, dict[str, Any]]:
    thread_id = (
        await client.post("/v1/research", json={"topic": TOPIC, "options": {"approval": "plan"}})
    ).json()["thread_id"]
    frames_seen = await collect(
        client, f"/v1/research/{thread_id}/events", until="approval_required"
    )
    return thread_id, frames_seen[-1].data["plan"]


async def test_an_edited_plan_is_the_one_researched(service: Service) -> None:
    async with service() as client:
        thread_id, plan = await _waiting_for_plan(client)
        edited = plan | {"search_queries": ["Gutenberg Bible Mainz", "movable type Korea"]}
        answer = await client.post(
            f"/v1/research/{thread_id}/resume", json={"decision": "edit", "plan": edited}
        )
        assert answer.status_code == 200, answer.text
        detail = await wait_for_status(client, thread_id, TERMINAL)
        notes = (await client.get(f"/v1/research/{thread_id}/notes")).json()
        events = await collect(client, f"/v1/research/{thread_id}/events")
    assert detail["plan"]["search_queries"] == ["Gutenberg Bible Mainz", "movable type Korea"]
    assert [n["query"] for n in notes][:2] == ["Gutenberg Bible Mainz", "movable type Korea"]
    # The edited plan is told again, marked, so a timeline shows what was run.
    told = [f.data for f in events if f.event == "plan"]
    assert [bool(p.get("edited")) for p in told] == [False, True]
    assert told[1]["plan"]["search_queries"] == edited["search_queries"]


async def test_at_the_report_gate_the_report_is_the_draft_waiting_for_sign_off(
    service: Service,
) -> None:
    async with service() as client:
        thread_id = (
            await client.post(
                "/v1/research", json={"topic": TOPIC, "options": {"approval": "plan_and_report"}}
            )
        ).json()["thread_id"]
        before = await client.get(f"/v1/research/{thread_id}/report")
        await collect(client, f"/v1/research/{thread_id}/events", until="approval_required")
        await client.post(f"/v1/research/{thread_id}/resume", json={"decision": "approve"})
        detail = await wait_for_status(client, thread_id, {"waiting_for_approval"} | TERMINAL)
        assert detail["approval"]["type"] == "report"
        draft = await client.get(
            f"/v1/research/{thread_id}/report", headers={"Accept": "application/json"}
        )
        html = await client.get(f"/v1/research/{thread_id}/report", headers={"Accept": "text/html"})
    assert before.status_code == 409  # no draft yet: nothing to show
    assert draft.status_code == 200 and draft.json()["report"] == detail["approval"]["report"]
    assert draft.json()["status"] == detail["approval"]["status"] and draft.json()["sources"]
    assert html.status_code == 200 and "<h2" in html.text


async def test_a_rejected_plan_comes_back_replanned_for_approval(service: Service) -> None:
    async with service() as client:
        thread_id, _ = await _waiting_for_plan(client)
        bad = await client.post(f"/v1/research/{thread_id}/resume", json={"decision": "reject"})
        assert bad.status_code == 422 and "feedback" in bad.json()["error"]["message"]
        answer = await client.post(
            f"/v1/research/{thread_id}/resume",
            json={"decision": "reject", "feedback": "focus on Korea"},
        )
        assert answer.status_code == 200
        detail = await wait_for_status(client, thread_id, {"waiting_for_approval"} | TERMINAL)
    assert detail["status"] == "waiting_for_approval"
    assert any("korea" in p.lower() for p in detail["approval"]["plan"]["investigation_points"])


async def test_metrics_count_runs_events_and_clients(service: Service) -> None:
    async with service() as client:
        thread_id = (await client.post("/v1/research", json={"topic": TOPIC})).json()["thread_id"]
        await collect(client, f"/v1/research/{thread_id}/events")
        text = (await client.get("/metrics")).text
    assert 'research_runs_total{status="queued"} 1.0' in text
    assert 'research_runs_total{status="completed"} 1.0' in text
    assert 'research_run_duration_seconds_count{status="completed"} 1.0' in text
    assert "research_sse_events_sent_total" in text
    assert "research_sse_clients 0.0" in text


async def test_the_service_runs_on_the_redis_checkpointer(service: Service, redis_url: str) -> None:
    async with service(redis_url=redis_url) as client:
        assert (await client.get("/readyz")).status_code == 200
        started = await client.post(
            "/v1/research", json={"topic": TOPIC, "options": {"approval": "plan"}}
        )
        thread_id = started.json()["thread_id"]
        await wait_for_status(client, thread_id, {"waiting_for_approval"})
        answer = await client.post(f"/v1/research/{thread_id}/resume", json={"decision": "approve"})
        assert answer.status_code == 200
        detail = await wait_for_status(client, thread_id, TERMINAL)
        report = await client.get(f"/v1/research/{thread_id}/report")
    assert detail["status"] == "completed" and detail["plan"]["search_queries"]
    assert report.status_code == 200 and "[^1]" in report.text


async def test_a_redis_outage_is_a_clear_503_and_the_service_recovers_without_restart(
    service: Service, tmp_path: Path
) -> None:
    with redis_server(data_dir=tmp_path) as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        async with service(redis_url=url) as client:
            assert (await client.get("/v1/research")).status_code == 200
            down = redis.Redis.from_url(url)
            with contextlib.suppress(redis.ConnectionError):
                down.shutdown(save=True)  # the server goes away mid-service, data kept
            answer = await client.get("/v1/research")
            ready = await client.get("/readyz")
            assert answer.status_code == 503, answer.text
            assert answer.json()["error"]["code"] == "backend_unavailable"
            assert "retry" in answer.json()["error"]["message"]
            assert ready.status_code == 503
            with redis_server(port=port, data_dir=tmp_path):  # back, same port and data
                assert (await client.get("/readyz")).status_code == 200
                assert (await client.get("/v1/research")).status_code == 200


async def test_more_sse_clients_than_a_default_redis_pool_all_get_every_event(
    service: Service, redis_url: str
) -> None:
    """Each follower blocks in XREAD on a connection: 150 of them must not starve anything."""
    async with service(redis_url=redis_url, search_delay_ms=200) as client:
        thread_id = (await client.post("/v1/research", json={"topic": TOPIC})).json()["thread_id"]
        # httpx's own pool stops at 100 connections: this client opens all 150 at once.
        async with httpx.AsyncClient(
            base_url=client.base_url, timeout=30, limits=httpx.Limits(max_connections=200)
        ) as many:
            streams = await asyncio.gather(
                *(collect(many, f"/v1/research/{thread_id}/events") for _ in range(150))
            )
        detail = (await client.get(f"/v1/research/{thread_id}")).json()
    assert detail["status"] == "completed"
    ids = [f.id for f in streams[0]]
    assert ids == list(range(1, len(ids) + 1)) and streams[0][-1].event == "done"
    assert all([f.id for f in frames] == ids for frames in streams)


async def test_every_json_answer_ends_with_a_newline(service: Service) -> None:
    async with service() as client:
        answers = [
            await client.post("/v1/research", json={"topic": TOPIC}),  # a model, 202
            await client.get("/v1/research/0123456789abcdef0123456789abcdef"),  # an error, 404
            await client.post("/v1/research", json={"topic": ""}),  # a validation error, 422
            await client.get("/healthz"),
        ]
    for answer in answers:
        assert answer.headers["content-type"].startswith("application/json"), answer.text
        assert answer.content.endswith(b"}\n"), answer.content[-40:]
